package configs

import (
	"fmt"
	"strconv"
	"strings"
)

// StormLimit is a number of nodes given as a count ("3") or as a percentage
// of a cluster's nodes ("33%"). The zero value is invalid.
type StormLimit struct {
	n       int
	percent bool
}

// Count returns a limit of n nodes.
func Count(n int) StormLimit { return StormLimit{n: n} }

// Percent returns a limit of p percent of the nodes.
func Percent(p int) StormLimit { return StormLimit{n: p, percent: true} }

// ParseStormLimit parses "3" or "33%". A count is at least 1; a percentage
// is from 1 to 100.
func ParseStormLimit(s string) (StormLimit, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 100 {
			return StormLimit{}, fmt.Errorf("invalid percentage %q: want a whole number from 1%% to 100%%", s)
		}
		return Percent(n), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return StormLimit{}, fmt.Errorf("invalid limit %q: want a count of at least 1 (\"3\") or a percentage (\"33%%\")", s)
	}
	return Count(n), nil
}

// IsZero reports whether the limit is unset.
func (l StormLimit) IsZero() bool { return l.n == 0 }

// IsPercent reports whether the limit is a percentage.
func (l StormLimit) IsPercent() bool { return l.percent }

// String returns the limit as written in configuration.
func (l StormLimit) String() string {
	if l.percent {
		return strconv.Itoa(l.n) + "%"
	}
	return strconv.Itoa(l.n)
}

// MarshalText implements encoding.TextMarshaler.
func (l StormLimit) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *StormLimit) UnmarshalText(b []byte) error {
	v, err := ParseStormLimit(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}
