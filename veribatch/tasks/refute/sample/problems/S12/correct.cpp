#include <bits/stdc++.h>
using namespace std;
int main() {
    long long n;
    cin >> n;
    long long r = (long long)sqrtl((long double)n);
    while (r * r > n) r--;
    while ((r + 1) * (r + 1) <= n) r++;
    cout << r << endl;
}
