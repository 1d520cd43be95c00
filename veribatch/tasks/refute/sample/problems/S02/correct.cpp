#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        int n;
        scanf("%d", &n);
        vector<int> a(n);
        for (auto &x : a) scanf("%d", &x);
        vector<int> b = a;
        sort(b.begin(), b.end());
        int diff = 0;
        for (int i = 0; i < n; i++) diff += a[i] != b[i];
        puts(diff == 0 || diff == 2 ? "YES" : "NO");
    }
}
