package online

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClassify checks how failures map to outcomes, from the error chain
// where the client kept it and from the text the array libraries format.
func TestClassify(t *testing.T) {
	tcs := []struct {
		name string
		err  error
		text string
		want Outcome
	}{
		{"401 from the API server", apierrors.NewUnauthorized("Unauthorized"), "", WrongCredentials},
		{"403 from the API server is no credential problem", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", fmt.Errorf("no")), "forbidden", Failed},
		{"connection refused in the chain", fmt.Errorf("get: %w", syscall.ECONNREFUSED), "", Refused},
		{"unknown host", &net.DNSError{Err: "no such host", Name: "x.example"}, "", Unreachable},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), "", Unreachable},
		{"Unity refused, as text", nil, "authentication error: Get \"https://x\": dial tcp 127.0.0.1:1: connect: connection refused", Refused},
		{"PowerStore wrong password", nil, "check: array unreachable: authentication required", WrongCredentials},
		{"PowerScale wrong password", nil, "check: array unreachable: connect: Authorization required", WrongCredentials},
		{"HTTP 401", nil, "login: 401 Unauthorized", WrongCredentials},
		{"TLS", nil, "x509: certificate signed by unknown authority", Unreachable},
		{"timeout", nil, "dial tcp 203.0.113.1:443: i/o timeout", Unreachable},
		{"anything else", nil, "system 7f5d not found", Failed},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.text
			if text == "" {
				text = tc.err.Error()
			}
			assert.Equal(t, tc.want, classify(tc.err, text))
		})
	}
}
