#include <bits/stdc++.h>
using namespace std;
long long sort_count(vector<int> &a, int lo, int hi, vector<int> &tmp) {
    if (hi - lo < 2) return 0;
    int mid = (lo + hi) / 2;
    long long c = sort_count(a, lo, mid, tmp) + sort_count(a, mid, hi, tmp);
    int i = lo, j = mid, k = lo;
    while (i < mid || j < hi) {
        if (j == hi || (i < mid && a[i] <= a[j])) tmp[k++] = a[i++];
        else { c += mid - i; tmp[k++] = a[j++]; }
    }
    for (int x = lo; x < hi; x++) a[x] = tmp[x];
    return c;
}
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n), tmp(n);
    for (auto &x : a) scanf("%d", &x);
    printf("%lld\n", sort_count(a, 0, n, tmp));
}
