package security

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TokenEntry is one line of the token file (JSON lines):
//
//	{"identity": "producer-1", "sha256": "<64 hex digits>"}
//
// sha256 is the SHA-256 of the token string as the client sends it after
// "Bearer ". Only hashes are stored: a leaked token file does not reveal
// tokens. Tokens are NewToken's 256 random bits, so a fast hash is enough
// (no password stretching needed). Blank lines and lines starting with '#'
// are ignored. Roles are not here: the policy file grants them to the
// identity, whichever way it authenticated.
type TokenEntry struct {
	Identity string `json:"identity"`
	SHA256   string `json:"sha256"`
}

// Tokens is a parsed token file.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	identity string
	sum      [sha256.Size]byte
}

// ErrBadToken: a bearer token not in the token file.
var ErrBadToken = errors.New("unknown bearer token")

// ParseTokens decodes a token file's content.
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var e TokenEntry
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tokens: line %d: %w", line, err)
		}
		sum, err := hex.DecodeString(e.SHA256)
		if e.Identity == "" || err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("tokens: line %d: want an identity and a 64-digit hex sha256", line)
		}
		te := tokenEntry{identity: e.Identity}
		copy(te.sum[:], sum)
		t.entries = append(t.entries, te)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return t, nil
}

// Lookup returns the identity of token, or ErrBadToken. It hashes the token
// and compares with every entry in constant time, so neither the result nor
// the time taken tells which bytes of a guess were right.
func (t *Tokens) Lookup(token string) (Identity, error) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrBadToken
	}
	return Identity{Name: t.entries[found].identity, Source: SourceToken}, nil
}

// NewToken returns a fresh random token and its token-file line.
func NewToken(identity string) (token string, line []byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	line, err = json.Marshal(TokenEntry{Identity: identity, SHA256: hex.EncodeToString(sum[:])})
	return token, line, err
}

// TokenFile is a token file re-read when it changes.
type TokenFile struct {
	w *watched[*Tokens]
}

// LoadTokenFile reads path once (failing on any error) and re-reads it when
// it changes; a bad edit keeps the previous tokens and is logged.
func LoadTokenFile(path string, opts ReloadOptions) (*TokenFile, error) {
	w, err := watchFile("tokens", path, ParseTokens, opts)
	if err != nil {
		return nil, err
	}
	return &TokenFile{w: w}, nil
}

// Tokens returns the current tokens.
func (f *TokenFile) Tokens() *Tokens { return f.w.get() }

// ReadTokenFile reads a client's token (one line, surrounding space
// trimmed), for --token-file.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s: want one token on one line", path)
	}
	return tok, nil
}
