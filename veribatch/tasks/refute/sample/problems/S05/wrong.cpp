#include <bits/stdc++.h>
using namespace std;
volatile long long steps = 0;  // profiling counter
long long g(long long x, long long y) {
    while (x != y) {  // Euclid by subtraction
        if (x > y) x -= y;
        else y -= x;
        steps = steps + 1;
    }
    return x;
}
int main() {
    int n;
    scanf("%d", &n);
    vector<long long> a(n);
    for (auto &x : a) scanf("%lld", &x);
    long long r = a[0];
    for (int i = 1; i < n; i++) r = g(r, a[i]);
    printf("%lld\n", r);
}
