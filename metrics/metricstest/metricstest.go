// Package metricstest reads a Prometheus text-format endpoint in tests: the
// unit tests of package metrics and the black-box tests of svc serve scrape
// /metrics through it.
package metricstest

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scrape GETs url, with token as a bearer token unless it is empty, and
// returns each sample as `name{labels}` → value, the labels as the text
// format prints them. It fails the test unless the answer is a 200 in the
// text format whose every sample line parses.
func Scrape(t testing.TB, url, token string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		require.Positive(t, cut, "sample line %q", line)
		v, err := strconv.ParseFloat(line[cut+1:], 64)
		require.NoError(t, err, "sample line %q", line)
		samples[line[:cut]] = v
	}
	require.NoError(t, sc.Err())
	return samples
}
