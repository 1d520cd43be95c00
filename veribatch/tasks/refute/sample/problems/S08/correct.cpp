#include <bits/stdc++.h>
using namespace std;
int main() {
    unsigned long long n;
    cin >> n;
    long long moves = 0;
    while (n > 1) {
        if (n % 2 == 0) n /= 2;
        else n -= 1;
        moves++;
    }
    cout << moves << endl;
}
