package saltmaster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Endpoint is a Vault server and the way to reach it. A test passes a
// FakeVault (or a Trace around one) as Transport; real use leaves it nil
// (http.DefaultTransport) or passes one with TLS settings.
type Endpoint struct {
	Address   string // e.g. "https://vault.example.com:8200"
	Namespace string // X-Vault-Namespace; empty: none
	Transport http.RoundTripper
	Timeout   time.Duration // per request; zero: client.py's 30 s read timeout
}

// vaultUnauthdPaths are client.py:52-58 VAULT_UNAUTHD_PATHS: requests to
// them do not count a token use.
var vaultUnauthdPaths = []string{
	"sys/wrapping/lookup",
	"sys/internal/ui/mounts",
	"sys/internal/ui/namespaces",
	"sys/seal-status",
	"sys/health",
}

// vclient is client.py's VaultClient, and AuthenticatedVaultClient when
// token is set.
type vclient struct {
	address   string
	namespace value.Value // null: no header (client.py:729)
	transport http.RoundTripper
	timeout   time.Duration
	// token returns the token for the next request (auth.py get_token);
	// used counts a use after it (client.py:1069-1070). Both nil for an
	// unauthenticated client.
	token func() (string, error)
	used  func()
	// now is the clock for a wrapped answer without a creation time.
	now func() time.Time
}

// response is one answer from Vault.
type response struct {
	status int
	body   value.Value // the decoded JSON; null when there is none
	ok     bool        // the body was JSON
	url    string
}

// nothing stands for a request without a payload (payload=None).
var nothing = value.Value{}

// requestRaw is client.py:543-591 request_raw (plus the authenticated
// override at 1044-1077): headers, then a body that is `requests`'
// json=payload. hasPayload false is payload None: no body at all.
func (c *vclient) requestRaw(ctx context.Context, method, endpoint string, payload value.Value, hasPayload bool, wrap value.Value, addHeaders map[string]string) (*response, error) {
	endpoint = strings.Trim(endpoint, "/")
	u := c.address + "/v1/" + endpoint
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("X-Vault-Request", "true")
	if !c.namespace.IsNull() {
		header.Set("X-Vault-Namespace", c.namespace.PyStr())
	}
	if wrap.Truthy() {
		header.Set("X-Vault-Wrap-TTL", wrap.PyStr())
	}
	if c.token != nil {
		tok, err := c.token()
		if err != nil {
			return nil, err
		}
		header.Set("X-Vault-Token", tok)
	}
	for k, v := range addHeaders {
		header.Set(k, v)
	}
	var body []byte
	switch m := strings.ToUpper(method); {
	case !hasPayload:
	case m == "GET" || m == "LIST" || m == "DELETE":
		// These carry no body: the payload becomes query parameters.
		q := url.Values{}
		for _, p := range payload.Pairs() {
			q.Add(p.Key.PyStr(), p.Val.PyStr())
		}
		if enc := q.Encode(); enc != "" {
			u += "?" + enc
		}
	default:
		var err error
		if body, err = pyJSON(payload, true, false); err != nil {
			return nil, saltErr("InvalidJSONError", "%v", err)
		}
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, saltErr("InvalidURL", "%v", err)
	}
	req.Header = header
	transport := c.transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	res, err := (&http.Client{Transport: transport}).Do(req)
	if c.used != nil && !hasAnyPrefix(endpoint, vaultUnauthdPaths) {
		// tokens are used regardless of status code
		c.used()
	}
	if err != nil {
		return nil, &saltext.SaltError{Class: "ConnectionError", Msg: err.Error(), Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, &saltext.SaltError{Class: "ConnectionError", Msg: err.Error(), Err: err}
	}
	out := &response{status: res.StatusCode, url: u}
	if v, err := value.DecodeJSON(raw); err == nil {
		out.body, out.ok = v, true
	}
	return out, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// request is client.py:503-541: True (a Bool) for 204, the error of
// _raise_status for a failure, the wrap_info for a wrapped answer, else
// the decoded JSON (an empty mapping when it was not JSON).
func (c *vclient) request(ctx context.Context, method, endpoint string, payload value.Value, hasPayload bool, wrap value.Value) (value.Value, error) {
	res, err := c.requestRaw(ctx, method, endpoint, payload, hasPayload, wrap, nil)
	if err != nil {
		return value.Value{}, err
	}
	if res.status == 204 {
		return value.NewBool(true), nil
	}
	data := res.body
	if !res.ok {
		data = value.NewMap(nil)
	}
	if res.status >= 400 {
		return value.Value{}, raiseStatus(method, endpoint, res)
	}
	if wrap.Truthy() {
		wi, _ := get(data, "wrap_info")
		return newWrapped(wi, c.now)
	}
	return data, nil
}

// raiseStatus is client.py:734-756 _raise_status.
func raiseStatus(method, endpoint string, res *response) error {
	e := &VaultError{Method: method, Path: strings.Trim(endpoint, "/"), Status: res.status, URL: res.url, Decoded: res.ok}
	if res.ok {
		errs, _ := get(res.body, "errors")
		for _, it := range errs.Items() {
			e.Errors = append(e.Errors, it.PyStr())
		}
	}
	return e
}

// wrappedResponse is leases.py:467-501 VaultWrappedResponse: its
// serialize_for_minion is what the runner hands to the minion.
type wrappedResponse struct {
	token        string
	ttl          value.Value
	creationTime int64
	creationPath string
}

// newWrapped builds the wrapped answer from Vault's wrap_info
// (VaultWrappedResponse(**data["wrap_info"])).
func newWrapped(wi value.Value, now func() time.Time) (value.Value, error) {
	if !wi.IsMap() {
		return value.Value{}, saltErr("TypeError", "saltext.vault.utils.vault.leases.VaultWrappedResponse() argument after ** must be a mapping, not %s", wi.Kind().PyType())
	}
	w := wrappedResponse{}
	cp, ok := get(wi, "creation_path")
	if !ok {
		return value.Value{}, saltErr("TypeError", "VaultWrappedResponse.__init__() missing 1 required positional argument: 'creation_path'")
	}
	w.creationPath = cp.PyStr()
	tok, ok := get(wi, "token")
	if !ok {
		return value.Value{}, saltErr("TypeError", "BaseLease.__init__() missing 1 required positional argument: 'lease_id'")
	}
	w.token = tok.PyStr()
	w.ttl, _ = get(wi, "ttl")
	ct, _ := get(wi, "creation_time")
	t, err := leaseTime(ct)
	switch {
	case err == errNoTime:
		if now == nil {
			now = time.Now
		}
		t = pyRoundTime(now().UnixNano())
	case err != nil:
		return value.Value{}, err
	}
	w.creationTime = t
	// serialize_for_minion (leases.py:490-501)
	return omap("wrap_info", omap(
		"token", w.token,
		"ttl", w.ttl,
		"creation_time", w.creationTime,
		"creation_path", w.creationPath,
	)), nil
}

var subsecond = regexp.MustCompile(`\.[\d]+`)

// leaseTime is leases.py:51-56: int(value), or helpers.py:100-131
// iso_to_timestamp for Vault's RFC 3339 strings (the sub-second part
// dropped, Z read as +00:00; a time without an offset is taken as UTC
// where Python would take local time).
func leaseTime(v value.Value) (int64, error) {
	switch v.Kind() {
	case value.Int:
		return v.Int(), nil
	case value.Bool:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	case value.Float:
		return pyInt(v.Float())
	case value.String:
		if i, ok := pyIntString(v.Str()); ok {
			return i, nil
		}
		s := subsecond.ReplaceAllString(v.Str(), "")
		if strings.HasSuffix(s, "Z") {
			s = strings.TrimSuffix(s, "Z") + "+00:00"
		}
		for _, layout := range []string{"2006-01-02T15:04:05-07:00", "2006-01-02T15:04:05"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.Unix(), nil
			}
		}
		return 0, saltErr("ValueError", "Invalid isoformat string: %s", str(s).PyRepr())
	case value.Null:
		return 0, errNoTime
	}
	return 0, saltErr("TypeError", "int() argument must be a string, a bytes-like object or a real number, not '%s'", v.Kind().PyType())
}

// errNoTime marks a missing time: leases.py then takes round(time.time()).
var errNoTime = saltErr("TypeError", "no time given")

// pyIntString is Python's int(str) for base 10: surrounding whitespace, a
// sign, digits with single underscores between them.
func pyIntString(s string) (int64, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	if s == "" || strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	clean, ok := pyFloatLiteral(s)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(sign+clean, 10, 64)
	return i, err == nil
}

// expectedCreationPath is client.py:85-110 _get_expected_creation_path for
// a minion's AppRole (re.escape of the mount and the role name).
func expectedCreationPath(secretType, mount, name string) string {
	switch secretType {
	case "token":
		return `auth/token/create(/[^/]+)?`
	case "secret_id":
		return "auth/" + regexp.QuoteMeta(mount) + "/role/" + regexp.QuoteMeta(name) + `/secret\-id`
	}
	return "auth/" + regexp.QuoteMeta(mount) + "/role/" + regexp.QuoteMeta(name) + `/role\-id`
}

// unwrap is client.py:593-640 VaultClient.unwrap with an expected creation
// path: sys/wrapping/lookup, the fullmatch check, sys/wrapping/unwrap.
func (c *vclient) unwrap(ctx context.Context, wrapToken, expected string) (value.Value, error) {
	if expected != "" {
		// wrap_info (client.py:642-648): a POST without a body, the
		// wrapping token in the header.
		res, err := c.requestRaw(ctx, "POST", "sys/wrapping/lookup", nothing, false, nothing, map[string]string{"X-Vault-Token": wrapToken})
		if err != nil {
			return value.Value{}, err
		}
		if res.status >= 400 {
			return value.Value{}, raiseStatus("POST", "sys/wrapping/lookup", res)
		}
		data, _ := get(res.body, "data")
		actual, _ := get(data, "creation_path")
		re, err := regexp.Compile(`^(?:` + expected + `)$`)
		if err != nil {
			return value.Value{}, fmt.Errorf("compiling %q: %w", expected, err)
		}
		if !actual.IsString() || !re.MatchString(actual.Str()) {
			return value.Value{}, saltErr("VaultUnwrapException",
				"Wrapped response was not created from expected Vault path: `%s` is not matched by any of `%s`.\n"+
					"This indicates tampering with the wrapping token by a third party "+
					"and should be taken very seriously! If you changed some authentication-"+
					"specific configuration on the master recently, especially minion "+
					"approle mount, you should consider if this error was caused by outdated "+
					"cached data on this minion instead.",
				actual.PyStr(), value.NewList([]value.Value{str(expected)}).PyRepr())
		}
	}
	// An unauthenticated client sends the wrapping token as its token and
	// an empty JSON object; an authenticated one would put it in the body.
	headers := map[string]string{"X-Vault-Token": wrapToken}
	payload := value.NewMap(nil)
	if c.token != nil {
		headers = nil
		payload = omap("token", wrapToken)
	}
	res, err := c.requestRaw(ctx, "POST", "sys/wrapping/unwrap", payload, true, nothing, headers)
	if err != nil {
		return value.Value{}, err
	}
	if res.status >= 400 {
		return value.Value{}, raiseStatus("POST", "sys/wrapping/unwrap", res)
	}
	if !res.ok {
		return value.Value{}, saltErr("JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")
	}
	return res.body, nil
}
