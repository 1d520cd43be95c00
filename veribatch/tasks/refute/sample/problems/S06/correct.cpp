#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n);
    for (auto &x : a) scanf("%d", &x);
    int cand = 0, bal = 0;
    for (int x : a) {
        if (bal == 0) cand = x;
        bal += x == cand ? 1 : -1;
    }
    int cnt = count(a.begin(), a.end(), cand);
    printf("%d\n", 2 * cnt > n ? cand : -1);
}
