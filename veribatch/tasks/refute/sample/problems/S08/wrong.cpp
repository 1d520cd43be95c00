#include <bits/stdc++.h>
using namespace std;
int main() {
    unsigned long long n;
    cin >> n;
    // moves = (number of bits - 1) halvings + (set bits - 1) subtractions
    int bits = 64 - __builtin_clzll(n);
    int ones = __builtin_popcountll(n);
    cout << (bits - 1) + (ones - 1) + (n == 1) << endl;
}
