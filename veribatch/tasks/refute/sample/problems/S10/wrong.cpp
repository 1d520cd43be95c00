#include <bits/stdc++.h>
using namespace std;
bool pal(const string &s, int l, int r) {
    while (l < r) if (s[l++] != s[r--]) return false;
    return true;
}
int main() {
    string s;
    cin >> s;
    int l = 0, r = (int)s.size() - 1;
    while (l < r && s[l] == s[r]) l++, r--;
    // on the first mismatch, skip the left character
    cout << (l >= r || pal(s, l + 1, r) ? "YES" : "NO") << endl;
}
