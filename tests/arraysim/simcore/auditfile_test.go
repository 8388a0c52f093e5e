package simcore_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// readAuditFile reads an audit file's lines.
func readAuditFile(t *testing.T, path string) []simcore.AuditRecord {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []simcore.AuditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r simcore.AuditRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestAuditFileKeepsStateRequestsAndObjects(t *testing.T) {
	fam := newKV()
	fam.kv["a"] = "1"
	fam.kv["b"] = "2"
	srv := simcore.New("kv-1", fam, nil)
	path := filepath.Join(t.TempDir(), "kv-1.jsonl")
	require.NoError(t, srv.SetAuditFile(path))
	tagged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "csi/" + r.RemoteAddr
		srv.ServeHTTP(w, r)
	})
	l, err := simcore.Serve(tagged, "127.0.0.1:0", false, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	c := &http.Client{Timeout: 5 * time.Second}

	st, _ := do(t, c, http.MethodPut, l.URL+"/kv/a", "9")
	require.Equal(t, http.StatusNoContent, st)
	st, _ = do(t, c, http.MethodGet, l.URL+"/kv/a", "")
	require.Equal(t, http.StatusOK, st)
	st, _ = do(t, c, http.MethodDelete, l.URL+"/kv/b", "")
	require.Equal(t, http.StatusNoContent, st)
	st, _ = do(t, c, http.MethodPut, l.URL+"/kv/c", "3")
	require.Equal(t, http.StatusNoContent, st)
	require.NoError(t, srv.CloseAuditFile())
	st, _ = do(t, c, http.MethodPut, l.URL+"/kv/d", "4")
	require.Equal(t, http.StatusNoContent, st)

	recs := readAuditFile(t, path)
	require.Len(t, recs, 5, "the start line and four requests; none after the file was closed")
	start := recs[0]
	assert.Equal(t, simcore.AuditRecordStart, start.Kind)
	assert.Equal(t, "kv-1", start.Array)
	assert.JSONEq(t, `{"items":[{"id":"a","value":"1"},{"id":"b","value":"2"}]}`, string(start.State))
	assert.Nil(t, start.AuditEntry)

	for i, r := range recs[1:] {
		require.Equal(t, simcore.AuditRecordRequest, r.Kind)
		require.NotNil(t, r.AuditEntry)
		assert.Equal(t, int64(i+1), r.Seq)
		assert.Equal(t, "csi", r.Requester)
		assert.False(t, r.Done.Before(r.Time), "answered after it arrived")
	}
	put, get, del, add := recs[1], recs[2], recs[3], recs[4]
	require.Len(t, put.Objects, 1)
	assert.Equal(t, "items[a]", put.Objects[0].Object)
	assert.JSONEq(t, `{"id":"a","value":"1"}`, string(put.Objects[0].Before))
	assert.JSONEq(t, `{"id":"a","value":"9"}`, string(put.Objects[0].After))
	assert.Equal(t, http.MethodGet, get.Method)
	assert.Empty(t, get.Objects, "a read changes nothing")
	require.Len(t, del.Objects, 1)
	assert.Equal(t, "items[b]", del.Objects[0].Object)
	assert.JSONEq(t, `{"id":"b","value":"2"}`, string(del.Objects[0].Before))
	assert.Nil(t, del.Objects[0].After, "a removed object has no after")
	require.Len(t, add.Objects, 1)
	assert.Nil(t, add.Objects[0].Before, "a new object has no before")
	assert.JSONEq(t, `{"id":"c","value":"3"}`, string(add.Objects[0].After))

	// The in-memory audit holds the same entries.
	mem := srv.Audit()
	require.Len(t, mem, 5)
	assert.Equal(t, put.Objects, mem[0].Objects)
	assert.Empty(t, mem[4].Objects, "no objects once the file is closed")
}

func TestAuditFileRefusesAnUnwritablePath(t *testing.T) {
	srv := simcore.New("kv-1", newKV(), nil)
	err := srv.SetAuditFile(filepath.Join(t.TempDir(), "no-such-dir", "kv-1.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "array kv-1")
}
