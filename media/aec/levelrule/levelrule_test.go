package levelrule

import "testing"

func TestRule(t *testing.T) {
	cases := []struct {
		name      string
		path      Path
		gainDB    float64
		converged bool
		want      float64
		ok        bool
	}{
		{"unknown line", Unknown, 0, false, -3, true},
		{"unknown line, filter converged", Unknown, 0, true, -15, true},
		{"no echo", None, 0, false, 0, false},
		{"loud echo is bounded by the unknown line's rule", Present, -6, false, -3, true},
		{"quiet echo", Present, -20, false, -11, true},
		{"quiet echo, converged", Present, -20, true, -23, true},
		{"loud echo, converged", Present, 0, true, -15, true},
	}
	for _, c := range cases {
		got, ok := Rule(c.path, c.gainDB, c.converged)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Rule = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
