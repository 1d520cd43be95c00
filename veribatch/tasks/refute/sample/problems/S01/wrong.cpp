#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n);
    for (auto &x : a) scanf("%d", &x);
    sort(a.begin(), a.end());
    int best = max(a[0] * a[1], a[n - 1] * a[n - 2]);
    printf("%d\n", best);
}
