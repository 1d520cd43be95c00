#include <bits/stdc++.h>
using namespace std;
int main() {
    long long n;
    cin >> n;
    long long r = (long long)sqrt((double)n);
    cout << r << endl;
}
