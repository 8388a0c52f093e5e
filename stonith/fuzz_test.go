package stonith

import (
	"errors"
	"testing"
)

// FuzzDecodeRequests feeds arbitrary bodies to the API's request decoder:
// it must return a value or an ErrBadRequest naming the problem, never panic.
func FuzzDecodeRequests(f *testing.F) {
	f.Add([]byte(`{"cluster":"c1","node":"n1","reason":"r"}`))
	f.Add([]byte(`{"cluster":"c1","node":"n1","reason":"r","force":true}`))
	f.Add([]byte(`{"cluster":1}`))
	f.Add([]byte(`{"bogus":true}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{&FenceRequest{}, &UnfenceRequest{}, &PauseRequest{}} {
			if err := decode(body, v); err != nil && !errors.Is(err, ErrBadRequest) {
				t.Fatalf("decode error is not ErrBadRequest: %v", err)
			}
		}
	})
}
