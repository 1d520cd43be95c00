#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    cin >> n;
    long long sum = 0, cnt = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        cin >> x;
        if (x > 0) sum += x, cnt++;
    }
    cout << (cnt ? sum / cnt : 0) << endl;
}
