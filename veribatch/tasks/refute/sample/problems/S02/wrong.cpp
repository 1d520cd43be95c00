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
        bool ok = is_sorted(a.begin(), a.end());
        for (int i = 0; i + 1 < n && !ok; i++) {
            swap(a[i], a[i + 1]);
            ok = is_sorted(a.begin(), a.end());
            swap(a[i], a[i + 1]);
        }
        puts(ok ? "Yes" : "No");
    }
}
