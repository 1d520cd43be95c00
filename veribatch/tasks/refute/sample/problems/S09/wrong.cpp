#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    cin >> t;
    while (t--) {
        int n;
        cin >> n;
        int misplaced = 0;
        for (int i = 1; i <= n; i++) {
            int x;
            cin >> x;
            misplaced += x != i;
        }
        cout << (misplaced + 1) / 2 << "\n";  // every swap fixes two elements
    }
}
