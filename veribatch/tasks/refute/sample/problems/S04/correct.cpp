#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> d(n + 1, 0);
    int best = 0;
    for (int i = 2; i <= n; i++) {
        int p;
        scanf("%d", &p);
        d[i] = d[p] + 1;
        best = max(best, d[i]);
    }
    printf("%d\n", best);
}
