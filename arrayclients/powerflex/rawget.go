package powerflex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dell/goscaleio/api"
	siotypes "github.com/dell/goscaleio/types/v1"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The leader's sweep lists every SDC of the system once a second.
// goscaleio's System.GetSdc decodes each one into a siotypes.Sdc (every
// field the MDM sends and its links); at 2,000 SDCs that decoding and its
// garbage were about two fifths of an idle leader's CPU time
// (bench/results.md, growth section). goscaleio has no call that returns
// less, nor one that takes a path and a value to decode into, so the sweep
// sends its GETs through goscaleio's own HTTP layer (goscaleio/api, built
// with the options goscaleio.NewClientWithArgs uses) with the session
// token of the pooled client it leased, and decodes only what it reads.
//
// Even so, encoding/json's decoder was still a fifth of an idle leader's
// CPU at 2,000 nodes: it buffers the whole answer (1.4 MB from the
// simulator, more from a real MDM) and scans it twice, once to find its
// end and once to decode it. The listing is decoded instead as it
// arrives, in one pass, by encoding/json/v2 (the go-json-experiment
// module, which becomes an alias of the standard library's package from
// Go 1.27): about 3 times less CPU and 20 times less garbage a listing
// (BenchmarkSweepListingDecode).

// sweepSdc is what a sweep reads of each SDC: the fields of the MDM's SDC
// object Sweep judges (the same fields siotypes.Sdc names).
type sweepSdc struct {
	ID                 string `json:"id"`
	MdmConnectionState string `json:"mdmConnectionState"`
}

// rawClient returns the connection's goscaleio/api client, built on first
// use. Only the call that leased the connection uses it.
func (p *powerFlexPool) rawClient(conn *powerFlexConn) (api.Client, error) {
	if conn.raw != nil {
		return conn.raw, nil
	}
	opts := api.ClientOptions{Insecure: p.cfg.Insecure, CAFilePath: p.cfg.CAFile, Timeout: time.Duration(p.seconds) * time.Second}
	// api.New makes no request: its context is unused.
	raw, err := api.New(context.Background(), p.cfg.Endpoint, opts, false)
	if err != nil {
		return nil, fmt.Errorf("build PowerFlex HTTP client for %s: %w", p.cfg.Endpoint, err)
	}
	conn.raw = raw
	return raw, nil
}

// get sends GET path with the leased client's session and decodes the
// answer into out (see send).
func (k powerFlexCall) get(path string, out any) error { return k.send(http.MethodGet, path, nil, out) }

// send sends a request with the leased client's session (body, if not
// nil, as JSON) and decodes the answer into out, as goscaleio does (the
// version's Accept header, Bearer or Basic by version): on a 401 (the
// session expired) it logs the leased client in again and retries once,
// as goscaleio's own calls do.
func (k powerFlexCall) send(method, path string, body, out any) error {
	return k.do(method, path, body, func(raw api.Client, headers map[string]string, version string) error {
		return raw.DoWithHeaders(k.ctx, method, path, headers, body, out, version)
	})
}

// stream sends a request as send does and hands a successful answer's
// body to read as it arrives; any other answer is goscaleio's API error
// (what its own calls return for it).
func (k powerFlexCall) stream(method, path string, body any, read func(io.Reader) error) error {
	return k.do(method, path, body, func(raw api.Client, headers map[string]string, version string) error {
		res, err := raw.DoAndGetResponseBody(k.ctx, method, path, headers, body, version)
		if err != nil {
			return err
		}
		defer func() { _ = res.Body.Close() }()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return raw.ParseJSONError(res)
		}
		return read(res.Body)
	})
}

// do runs call, which sends one request, with the leased client's session
// and the version's headers, and once more after logging the leased
// client in again if the answer is a 401 (the session expired).
func (k powerFlexCall) do(method, path string, body any, call func(raw api.Client, headers map[string]string, version string) error) error {
	raw, err := k.p.rawClient(k.conn)
	if err != nil {
		return err
	}
	version := k.p.apiVersion()
	accept := api.HeaderValContentTypeJSON
	if version != "" {
		accept += ";version=" + version
	}
	headers := map[string]string{api.HeaderKeyAccept: accept, api.HeaderKeyContentType: accept}
	raw.SetToken(k.conn.c.GetToken())
	err = call(raw, headers, version)
	if e, ok := powerFlexAPIError(err); !ok || e.HTTPStatusCode != http.StatusUnauthorized {
		return err
	}
	if _, err := k.client().Authenticate(k.p.connectConfig()); err != nil {
		return fmt.Errorf("log in to PowerFlex %s again: %w", k.p.cfg.Endpoint, err)
	}
	raw.SetToken(k.conn.c.GetToken())
	return call(raw, headers, version)
}

// sweepListingMax bounds a listing's answer: a system's SDCs (at most a
// few thousand, a couple of kilobytes each) fit many times over, while a
// gateway that sends without end cannot exhaust the replica's memory.
const sweepListingMax = 64 << 20

// errAnswerTooLong is the error of an answer longer than its bound.
var errAnswerTooLong = errors.New("answer longer than its bound")

// boundedBody reads at most max bytes of r; reading past them fails with
// errAnswerTooLong, naming what was read (what) and the bound.
type boundedBody struct {
	r    io.Reader
	left int64
	max  int64
	what string
}

func newBoundedBody(r io.Reader, limit int64, what string) *boundedBody {
	return &boundedBody{r: r, left: limit, max: limit, what: what}
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Exactly max bytes is fine; one more is not.
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%s: %w (%d bytes)", b.what, errAnswerTooLong, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// sweepSdcs lists the system's SDCs (GET
// /api/instances/System::<id>/relationships/Sdc, the request
// System.GetSdc sends), decoding only what the sweep reads.
func (k powerFlexCall) sweepSdcs(sys *siotypes.System) ([]sweepSdc, error) {
	path := "/api/instances/System::" + sys.ID + "/relationships/Sdc"
	var out []sweepSdc
	err := k.stream(http.MethodGet, path, nil, func(body io.Reader) error {
		return decodeSweepSdcs(newBoundedBody(body, sweepListingMax, "GET "+path), &out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeSweepSdcs decodes an SDC listing from r in one pass, keeping of
// each SDC only the fields sweepSdc names. As goscaleio's decoding
// (encoding/json) does, it matches field names without regard to case
// (goscaleio's own Sdc type relies on it: its tag "SdcIp" reads the MDM's
// "sdcIp"), takes invalid UTF-8 in strings, and skips fields it does not
// know; unlike it, an object that names a field twice is an error rather
// than its last value, and so is anything after the listing.
func decodeSweepSdcs(r io.Reader, out *[]sweepSdc) error {
	return jsonv2.UnmarshalRead(r, out, jsonv2.MatchCaseInsensitiveNames(true), jsontext.AllowInvalidUTF8(true))
}

// sdcStatisticsByID reads an SDC's statistics (GET
// /api/instances/Sdc::<id>/relationships/Statistics, the link
// Sdc.GetStatistics follows).
func (k powerFlexCall) sdcStatisticsByID(id string) (*siotypes.SdcStatistics, error) {
	var out siotypes.SdcStatistics
	if err := k.get("/api/instances/Sdc::"+id+"/relationships/Statistics", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// sdcStatisticsProperties are the statistics a sweep reads of each SDC:
// those powerFlexIO judges.
var sdcStatisticsProperties = []string{"userDataReadBwc", "userDataWriteBwc"}

// selectedStatistics is the body of a querySelectedStatistics action: the
// objects' IDs and the statistics to read of each.
type selectedStatistics struct {
	IDs        []string `json:"ids"`
	Properties []string `json:"properties"`
}

// selectedSdcStatistics is one SDC's entry in a querySelectedStatistics
// answer: the properties sdcStatisticsProperties asks for, nil when the
// answer leaves one out.
type selectedSdcStatistics struct {
	UserDataReadBwc  *siotypes.BWC `json:"userDataReadBwc"`
	UserDataWriteBwc *siotypes.BWC `json:"userDataWriteBwc"`
}

// statistics returns the SDC's statistics when the entry holds every
// property powerFlexIO judges. An entry without one is no reading: decoded
// as is, the missing counter would read as zero I/O, a quiet sample the
// array never gave.
func (s *selectedSdcStatistics) statistics() (*siotypes.SdcStatistics, bool) {
	if s == nil || s.UserDataReadBwc == nil || s.UserDataWriteBwc == nil {
		return nil, false
	}
	return &siotypes.SdcStatistics{UserDataReadBwc: *s.UserDataReadBwc, UserDataWriteBwc: *s.UserDataWriteBwc}, true
}

// sdcsStatistics reads the statistics powerFlexIO judges of many SDCs in
// one request: POST /api/types/Sdc/instances/action/querySelectedStatistics
// with their ids and the properties, which the gateway answers with an
// object keyed by SDC ID, each holding the properties asked for (the
// action the PowerFlex REST API has on every type with statistics, e.g.
// PyPowerFlex's Sdc.query_selected_statistics; goscaleio has no call for
// it). An SDC the answer leaves out, or whose entry lacks a property, is
// not in the map.
func (k powerFlexCall) sdcsStatistics(ids []string) (map[string]*siotypes.SdcStatistics, error) {
	var answer map[string]*selectedSdcStatistics
	body := selectedStatistics{IDs: ids, Properties: sdcStatisticsProperties}
	if err := k.send(http.MethodPost, "/api/types/Sdc/instances/action/querySelectedStatistics", body, &answer); err != nil {
		return nil, err
	}
	out := make(map[string]*siotypes.SdcStatistics, len(answer))
	for id, entry := range answer {
		if st, ok := entry.statistics(); ok {
			out[id] = st
		}
	}
	return out, nil
}
