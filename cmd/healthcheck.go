package cmd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckExitHelp is the exit-code paragraph of `svc healthcheck --help`:
// the codes a container health check understands.
const healthcheckExitHelp = "Exit code: 0 the URL answered 2xx, 1 it did not (other status, error, timeout, bad URL), 64 usage error."

// maxHealthcheckTimeout bounds --timeout.
const maxHealthcheckTimeout = time.Minute

func newHealthcheckCommand() *cobra.Command {
	var timeout time.Duration
	var caFile string
	c := &cobra.Command{
		Use:   "healthcheck URL",
		Short: "Probe a health URL: exit 0 when it answers 2xx (for container health checks)",
		Long: "GET the URL (http or https, e.g. http://127.0.0.1:8080/healthz) once, without proxy and without\n" +
			"following redirects, and exit 0 if it answers 2xx within --timeout. The svc image has no curl:\n" +
			"docker-compose.yml's health checks run this.\n" + healthcheckExitHelp,
		Args: argsOf(1, "one argument, the URL to probe"),
		PreRunE: func(*cobra.Command, []string) error {
			if timeout <= 0 || timeout > maxHealthcheckTimeout {
				return fmt.Errorf("--timeout must be above 0 and at most %v, got %v", maxHealthcheckTimeout, timeout)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			status, err := probeHealth(args[0], caFile, timeout)
			if err != nil {
				return failure(err)
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), status)
			return failure(err)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the whole answer")
	c.Flags().StringVar(&caFile, "ca-file", "", "PEM bundle trusted for an https URL (default: the system roots)")
	return c
}

// probeHealth GETs raw once within timeout and returns its status when it
// is 2xx.
func probeHealth(raw, caFile string, timeout time.Duration) (string, error) {
	u, ok := httpURL(raw)
	if !ok {
		return "", fmt.Errorf("healthcheck: want an http(s) URL, got %q", redactURL(raw))
	}
	transport := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if caFile != "" {
		pool, err := readCAFile(caFile)
		if err != nil {
			return "", err
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client := &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Get(u.String())
	if err != nil {
		return "", fmt.Errorf("healthcheck %s: %w", u.Redacted(), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("healthcheck %s: answered %s", u.Redacted(), resp.Status)
	}
	return resp.Status, nil
}

// readCAFile reads a PEM bundle of trusted certificates.
func readCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", path)
	}
	return pool, nil
}
