#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    long long r = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        scanf("%lld", &x);
        r = __gcd(r, x);
    }
    printf("%lld\n", r);
}
