package closest

import "testing"

func TestName(t *testing.T) {
	tools := []string{"create_order", "find_orders", "get_budget", "cancel_order"}
	cases := []struct {
		want  string
		among []string
		got   string
		gotOK bool
	}{
		{"create_ordr", tools, "create_order", true},  // one deletion
		{"creaet_order", tools, "create_order", true}, // a swap counts one
		{"find_order", tools, "find_orders", true},
		{"get_budgte", tools, "get_budget", true},
		{"refund", tools, "", false},       // nothing near
		{"ab", []string{"ax"}, "", false},  // 1 edit of 2 letters is not a typo
		{"create_order", tools, "", false}, // an exact name needs no hint
		{"x", nil, "", false},
		{"limt", []string{"limit", "list"}, "limit", true}, // ties go to the first
		{"sevrer", []string{"server", "policy"}, "server", true},
	}
	for _, tc := range cases {
		got, ok := Name(tc.want, tc.among)
		if got != tc.got || ok != tc.gotOK {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", tc.want, got, ok, tc.got, tc.gotOK)
		}
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"ab", "ba", 1}, {"ca", "abc", 3}, {"größe", "grösse", 2},
	}
	for _, tc := range cases {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
