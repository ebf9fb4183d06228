package token

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/MicahParks/jwkset"
	"golang.org/x/time/rate"
)

// maxJWKSBytes bounds what the edge reads of an identity provider's answer: a JWK Set of a few
// keys is a few KB.
const maxJWKSBytes = 1 << 20

// Fetching a JWK Set from an identity provider (Options.JWKSURL) goes through jwkset's HTTP
// storage, which keyfunc builds on: a fetch at start bounded by Options.Wait, then one every
// Options.Refresh, and one more when a token names a kid the set lacks, at most once per
// unknownKIDEvery. A token with a made-up kid never waits for that limit: when a fetch is not
// allowed now, its lookup fails at once (unknownKIDs; jwkset's own limiter would hold it up to
// its RateLimitWaitMax). A fetch that fails, or brings a set with no key usable in the
// configured algorithms, keeps the set held (guarded.KeyReplaceAll).

// What Options.Wait and Options.Refresh are when not set: the edge's defaults.
const (
	defaultWait    = 5 * time.Second
	defaultRefresh = 5 * time.Minute
)

// unknownKIDEvery is the least time between fetches caused by unknown kids: the refresh interval,
// or 30 s when that is longer.
func unknownKIDEvery(refresh time.Duration) time.Duration { return min(refresh, 30*time.Second) }

// remoteStorage returns the JWK Set storage of o.JWKSURL, with given (the file's keys, or
// nil) ahead of the provider's. It returns once the first fetch succeeded or o.Wait passed.
func remoteStorage(ctx context.Context, o Options, given jwkset.Storage) (jwkset.Storage, error) {
	u, err := url.Parse(o.JWKSURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("JWKS URL %q: expected https://host/path", o.JWKSURL)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	// Unset, jwkset would wait a minute per fetch, and a zero limit would let every unknown kid
	// fetch.
	if o.Wait <= 0 {
		o.Wait = defaultWait
	}
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
	}
	client := o.Client
	if client == nil {
		client = &http.Client{}
	}
	client = httpsOnly(client)
	held := &guarded{Storage: jwkset.NewMemoryStorage(), algs: o.Algs}
	store, err := jwkset.NewStorageFromHTTP(o.JWKSURL, jwkset.HTTPClientStorageOptions{
		Client: client, Ctx: ctx, HTTPTimeout: o.Wait, NoErrorReturnFirstHTTPReq: true,
		RefreshInterval: o.Refresh, Storage: held,
		RefreshErrorHandler: func(_ context.Context, err error) {
			log.Warn("fetch shoppers' token keys; keeping the keys held", "url", o.JWKSURL, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS URL %q: %w", o.JWKSURL, err)
	}
	fetching, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		Given: given, HTTPURLs: map[string]jwkset.Storage{o.JWKSURL: store},
		RateLimitWaitMax:  o.Wait,                       // bounds the fetch an unknown kid makes
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1), // never waits: unknownKIDs limits
	})
	if err != nil {
		return nil, err
	}
	kept := []jwkset.Storage{store}
	if given != nil {
		kept = []jwkset.Storage{given, store}
	}
	return &unknownKIDs{Storage: fetching, held: kept, every: rate.NewLimiter(rate.Every(unknownKIDEvery(o.Refresh)), 1)}, nil
}

// unknownKIDs is the key storage with its fetches for unknown kids limited without waiting: a
// kid the keys held lack fetches the set through the client (Storage) only when every allows
// one now, and is not found at once otherwise.
type unknownKIDs struct {
	jwkset.Storage                  // the client: fetches the set on a kid it lacks
	held           []jwkset.Storage // the keys held (the file's, the provider's), read without fetching
	every          *rate.Limiter
}

func (u *unknownKIDs) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	for _, s := range u.held {
		jwk, err := s.KeyRead(ctx, kid)
		if !errors.Is(err, jwkset.ErrKeyNotFound) {
			return jwk, err
		}
	}
	if !u.every.Allow() {
		return jwkset.JWK{}, fmt.Errorf("%w %q (the set was fetched for an unknown kid less than the limit ago)", jwkset.ErrKeyNotFound, kid)
	}
	return u.Storage.KeyRead(ctx, kid)
}

// guarded is the provider's keys as last fetched. A fetch whose set has no key usable in algs
// (an empty set, a provider answering with the wrong document) does not replace them.
type guarded struct {
	jwkset.Storage
	algs []string
}

func (g *guarded) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	if err := checkSet(given, g.algs); err != nil {
		return fmt.Errorf("refused the fetched key set: %w", err)
	}
	return g.Storage.KeyReplaceAll(ctx, given)
}

// errNotHTTPS is returned for a redirect away from HTTPS.
var errNotHTTPS = errors.New("the JWKS URL redirected to a URL that is not https")

// httpsOnly returns a copy of c that follows redirects only to HTTPS URLs and reads at most
// maxJWKSBytes of an answer (a longer one fails to decode, and the keys held stay).
func httpsOnly(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return errNotHTTPS
		}
		if len(via) >= 5 {
			return errors.New("the JWKS URL redirected more than 5 times")
		}
		return nil
	}
	next := cc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cc.Transport = limitedBody{next}
	return &cc
}

type limitedBody struct{ next http.RoundTripper }

func (l limitedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxJWKSBytes), resp.Body}
	return resp, nil
}
