package kube

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// CheckReadyz asks the API server's /readyz (which includes its etcd) and
// returns an error unless it answers ok. The context bounds the check.
func CheckReadyz(ctx context.Context, cs kubernetes.Interface) error {
	rc := cs.Discovery().RESTClient()
	if rc == nil {
		return fmt.Errorf("GET /readyz: client has no REST client")
	}
	body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("GET /readyz: answered %q", truncate(string(body), 200))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
