// Package closest finds the name someone most likely meant: the flag or
// tool name nearest to a mistyped one, for "did you mean" hints.
package closest

import "unicode/utf8"

// Name returns the candidate nearest to want by edit distance (insertions,
// deletions, substitutions and swaps of neighbours each count 1), if one is
// near enough to be a typo: at most 2 edits, and fewer than half of want's
// letters. Ties go to the earlier candidate.
func Name(want string, among []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range among {
		if c == want {
			continue
		}
		d := distance(want, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	n := utf8.RuneCountInString(want)
	if bestD < 0 || bestD > 2 || 2*bestD >= n {
		return "", false
	}
	return best, true
}

// distance is the optimal string alignment distance between a and b.
func distance(a, b string) int {
	r, s := []rune(a), []rune(b)
	// d[i][j] is the distance between r[:i] and s[:j]; three rows suffice.
	prev2 := make([]int, len(s)+1)
	prev := make([]int, len(s)+1)
	cur := make([]int, len(s)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(s); j++ {
			cost := 1
			if r[i-1] == s[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && r[i-1] == s[j-2] && r[i-2] == s[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(s)]
}
