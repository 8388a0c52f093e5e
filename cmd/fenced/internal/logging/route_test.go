package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRoute: klog (client-go), the standard log package (gopowerstore
// before a client has its logger) and prints on stdout (gounity,
// goscaleio) come out as fenced's JSON records, redacted; after restore
// they go where they went before.
func TestRoute(t *testing.T) {
	red := NewRedactor()
	red.Add(planted)
	var buf lockedBuffer
	l, err := New(Options{Format: "json", Level: "info", Output: Stream, Writer: &buf, Redactor: red})
	require.NoError(t, err)

	restore := Route(l)
	klog.InfoS("Starting reflector", "type", "*v1.Node", "resyncPeriod", "0s")
	klog.ErrorS(errors.New("watch failed: "+planted), "Unhandled Error", "reflector_name", "k8s.io/client-go")
	log.Printf("Session management is enabled. pw=%s", planted)
	fmt.Println("gounity logger initiated. This should be called only once.")
	fmt.Printf("goscaleio.Error Error with details  {Message:%q}\n", "x")
	klog.Flush()
	restore()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 5, buf.String())
	libs := map[string]int{}
	for _, line := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "not JSON: %s", line)
		for _, k := range []string{"time", "level", "msg"} {
			assert.Contains(t, rec, k, line)
		}
		if lib, ok := rec["library"].(string); ok {
			libs[lib]++
		}
		if rec["source"] == "stdout" {
			libs["stdout"]++
		}
		for k := range rec {
			assert.Equal(t, Key(k), k, "key style in %s", line)
		}
	}
	assert.Equal(t, map[string]int{"klog": 2, "stdlog": 1, "stdout": 2}, libs)
	assert.NotContains(t, buf.String(), planted)
	assert.Contains(t, buf.String(), `"reflectorName"`)
	assert.Contains(t, buf.String(), `"error":"watch failed: [REDACTED]"`)

	before := buf.String()
	log.Print("after restore")
	fmt.Fprint(os.Stdout, "")
	assert.Equal(t, before, buf.String(), "restored: the standard logger is no longer routed")
}

func TestLineWriter(t *testing.T) {
	var buf lockedBuffer
	l, err := New(Options{Format: "json", Output: Stream, Writer: &buf})
	require.NoError(t, err)
	w := LineWriter(l, 0)
	_, _ = w.Write([]byte("one\ntw"))
	_, _ = w.Write([]byte("o\n\n  \n"))
	_, _ = w.Write([]byte(strings.Repeat("x", maxLine+1)))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], `"msg":"one"`)
	assert.Contains(t, lines[1], `"msg":"two"`)
}
