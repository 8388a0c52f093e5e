package powerflex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelectedStatisticsNeedEveryProperty: an entry of a bulk statistics
// answer counts as a reading only with both counters powerFlexIO judges;
// one that lacks either (a gateway that drops a property it does not
// know) is no reading, never zero I/O, so the sweep reads that SDC on its
// own instead of recording a quiet sample.
func TestSelectedStatisticsNeedEveryProperty(t *testing.T) {
	var answer map[string]*selectedSdcStatistics
	require.NoError(t, json.Unmarshal([]byte(`{
		"a": {"userDataReadBwc": {"numOccured": 0, "numSeconds": 1}, "userDataWriteBwc": {"numOccured": 3, "numSeconds": 1}},
		"b": {"userDataReadBwc": {"numOccured": 0, "numSeconds": 1}},
		"c": {},
		"d": null
	}`), &answer))
	st, ok := answer["a"].statistics()
	require.True(t, ok)
	assert.Equal(t, 3, st.UserDataWriteBwc.NumOccured)
	for _, id := range []string{"b", "c", "d", "missing"} {
		_, ok := answer[id].statistics()
		assert.False(t, ok, id)
	}
}

// sdcListing is a system's SDC listing of n SDCs, each as goscaleio's Sdc
// type describes the MDM's object (every field and its four links), SDC
// i Disconnected when gone(i).
func sdcListing(t testing.TB, n int, gone func(int) bool) []byte {
	t.Helper()
	sdcs := make([]siotypes.Sdc, n)
	for i := range sdcs {
		id := fmt.Sprintf("%016x", 0x9a00000000000000+uint64(i))
		state := "Connected"
		if gone(i) {
			state = "Disconnected"
		}
		sdcs[i] = siotypes.Sdc{
			SystemID: "1a2b3c4d5e6f7a8b", SdcApproved: true, SdcIP: "10.0.0.1", SdcIPs: []string{"10.0.0.1"},
			SdcGUID: fmt.Sprintf("6A1B%04X-0000-4000-8000-%012X", i, i), MdmConnectionState: state,
			Name: fmt.Sprintf("node-%04d", i), PerfProfile: "HighPerformance", OSType: "Linux", HostType: "SdcHost", ID: id,
			Links: []*siotypes.Link{
				{Rel: "self", HREF: "/api/instances/Sdc::" + id},
				{Rel: "/api/Sdc/relationship/Statistics", HREF: "/api/instances/Sdc::" + id + "/relationships/Statistics"},
				{Rel: "/api/Sdc/relationship/Volume", HREF: "/api/instances/Sdc::" + id + "/relationships/Volume"},
				{Rel: "/api/parent/relationship/systemId", HREF: "/api/instances/System::1a2b3c4d5e6f7a8b"},
			},
		}
	}
	b, err := json.Marshal(sdcs)
	require.NoError(t, err)
	return b
}

// decodeSweepSdcsV1 is the decoding the sweep used before (goscaleio's:
// encoding/json), the reference decodeSweepSdcs is held to.
func decodeSweepSdcsV1(b []byte) ([]sweepSdc, error) {
	var out []sweepSdc
	err := json.Unmarshal(b, &out)
	return out, err
}

// TestDecodeSweepSdcs: the one-pass listing decoder reads what
// encoding/json (goscaleio's decoder) reads from a listing, including
// field names in another case and invalid UTF-8 in a string, and refuses
// what is not one listing.
func TestDecodeSweepSdcs(t *testing.T) {
	listing := sdcListing(t, 50, func(i int) bool { return i%7 == 3 })
	var got []sweepSdc
	require.NoError(t, decodeSweepSdcs(bytes.NewReader(listing), &got))
	want, err := decodeSweepSdcsV1(listing)
	require.NoError(t, err)
	require.Equal(t, want, got)
	assert.Equal(t, "Disconnected", got[3].MdmConnectionState)

	for name, doc := range map[string]string{
		"name in another case": `[{"ID":"a1","MdmConnectionState":"Disconnected"}]`,
		"invalid UTF-8":        "[{\"id\":\"a1\",\"name\":\"n\xff\",\"mdmConnectionState\":\"Connected\"}]",
		"null fields":          `[{"id":"a1","mdmConnectionState":null,"links":null}]`,
		"empty":                `[]`,
		"null":                 `null`,
	} {
		var got []sweepSdc
		require.NoError(t, decodeSweepSdcs(strings.NewReader(doc), &got), name)
		want, err := decodeSweepSdcsV1([]byte(doc))
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	for name, doc := range map[string]string{
		"state twice":    `[{"id":"a1","mdmConnectionState":"Connected","mdmConnectionState":"Disconnected"}]`,
		"trailing data":  `[{"id":"a1"}] [{"id":"a2"}]`,
		"truncated":      `[{"id":"a1","mdmConnectionState":"Conn`,
		"not a listing":  `{"id":"a1"}`,
		"number as ID":   `[{"id":7}]`,
		"empty document": ``,
	} {
		var got []sweepSdc
		assert.Error(t, decodeSweepSdcs(strings.NewReader(doc), &got), name)
	}
}

// TestBoundedBody: an answer up to its bound reads whole; one byte more
// fails with an error that names what was read and the bound, instead of
// reading on without end.
func TestBoundedBody(t *testing.T) {
	doc := `[{"id":"a1","mdmConnectionState":"Connected"}]`
	var got []sweepSdc
	require.NoError(t, decodeSweepSdcs(newBoundedBody(strings.NewReader(doc), int64(len(doc)), "GET /sdcs"), &got))
	assert.Len(t, got, 1)

	err := decodeSweepSdcs(newBoundedBody(strings.NewReader(doc+" "), int64(len(doc)), "GET /sdcs"), &got)
	require.ErrorIs(t, err, errAnswerTooLong)
	assert.Contains(t, err.Error(), "GET /sdcs")
	assert.Contains(t, err.Error(), fmt.Sprint(len(doc)))

	// A gateway that never stops: the read ends at the bound.
	endless := io.MultiReader(strings.NewReader(`[{"id":"a1","name":"`), zeroes{})
	err = decodeSweepSdcs(newBoundedBody(endless, 1<<20, "GET /sdcs"), &got)
	require.ErrorIs(t, err, errAnswerTooLong)
}

// zeroes reads '0' without end.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// FuzzDecodeSweepSdcs: the listing decoder never panics, and whatever it
// accepts encoding/json (goscaleio's decoder) accepts too, with as many
// SDCs: it is never more lenient than the decoding it replaced.
func FuzzDecodeSweepSdcs(f *testing.F) {
	f.Add(sdcListing(f, 3, func(i int) bool { return i == 1 }))
	f.Add([]byte(`[{"ID":"a1","MdmConnectionState":"Disconnected"}]`))
	f.Add([]byte("[{\"id\":\"a\xff\"}]"))
	f.Add([]byte(`[{"id":"a1","id":"a2"}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var got []sweepSdc
		if err := decodeSweepSdcs(bytes.NewReader(doc), &got); err != nil {
			return
		}
		want, err := decodeSweepSdcsV1(doc)
		require.NoError(t, err, "accepted by the one-pass decoder, refused by encoding/json: %q", doc)
		require.Len(t, got, len(want))
	})
}

// BenchmarkSweepListingDecode decodes a 2,000-SDC listing as the sweep
// did before (encoding/json's Decoder over the answer, goscaleio's way)
// and as it does now (decodeSweepSdcs, one pass as it arrives).
func BenchmarkSweepListingDecode(b *testing.B) {
	listing := sdcListing(b, 2000, func(i int) bool { return i%100 == 0 })
	b.Run("decoder=encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(listing)))
		b.ReportAllocs()
		for b.Loop() {
			var out []sweepSdc
			require.NoError(b, json.NewDecoder(bytes.NewReader(listing)).Decode(&out))
		}
	})
	b.Run("decoder=one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(listing)))
		b.ReportAllocs()
		for b.Loop() {
			var out []sweepSdc
			require.NoError(b, decodeSweepSdcs(bytes.NewReader(listing), &out))
		}
	})
}
