package members

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Limits of a keyring.
const (
	// MinKeyLen is the shortest key accepted, in bytes after decoding: 128
	// bits, what a guess must cover.
	MinKeyLen = 16
	// MaxKeyLen is the longest key accepted, in bytes after decoding.
	MaxKeyLen = 1024
	// MaxKeys bounds a keyring: a datagram that matches no key costs one
	// HMAC per key, so the bound is the most one forged datagram can cost.
	MaxKeys = 16
	// generatedKeyLen is the length of GenerateKey's keys: 256 bits, the
	// size of HMAC-SHA256's hash.
	generatedKeyLen = 32
)

// Keyring holds the shared keys heartbeats are signed and verified with: the
// first signs, every one verifies. It is immutable and safe for concurrent
// use. Rotation without a flap: add the new key second on every node, then
// make it first on every node, then remove the old one; at each step every
// node still verifies what every other signs.
type Keyring struct {
	keys [][]byte
}

// NewKeyring returns a keyring of keys, the first signing. There must be 1 to
// MaxKeys keys, each MinKeyLen to MaxKeyLen bytes.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%d keys, want at most %d", len(keys), MaxKeys)
	}
	k := &Keyring{keys: make([][]byte, len(keys))}
	for i, key := range keys {
		if len(key) < MinKeyLen || len(key) > MaxKeyLen {
			return nil, fmt.Errorf("key %d: %d bytes, want %d to %d", i+1, len(key), MinKeyLen, MaxKeyLen)
		}
		k.keys[i] = bytes.Clone(key)
	}
	return k, nil
}

// ParseKeys reads a key file: one key a line, the first signing. A line is
// base64 (standard alphabet, padding optional), or hex when it holds only hex
// digits (an even number of them); each decodes to MinKeyLen to MaxKeyLen
// bytes. Blank lines and lines starting with '#' are ignored, as is white
// space around a key. Errors name the line, never its content.
func ParseKeys(data []byte) (*Keyring, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if len(key) < MinKeyLen || len(key) > MaxKeyLen {
			return nil, fmt.Errorf("line %d: key of %d bytes, want %d to %d", i+1, len(key), MinKeyLen, MaxKeyLen)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in it: want one key a line, base64 or hex")
	}
	return NewKeyring(keys...)
}

// decodeKey decodes one key line: hex when it is all hex digits, else base64.
func decodeKey(s string) ([]byte, error) {
	if isHex(s) {
		return hex.DecodeString(s)
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("neither base64 nor hex")
	}
	return b, nil
}

func isHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// GenerateKey returns a new random key of 32 bytes as a key-file line
// (base64, no newline).
func GenerateKey() (string, error) {
	b := make([]byte, generatedKeyLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate heartbeat key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Len returns the number of keys.
func (k *Keyring) Len() int { return len(k.keys) }

// IDs names the keys for logs, in order: the first 8 hex digits of each key's
// SHA-256, which identify a key without revealing it.
func (k *Keyring) IDs() []string {
	ids := make([]string, len(k.keys))
	for i, key := range k.keys {
		sum := sha256.Sum256(key)
		ids[i] = hex.EncodeToString(sum[:4])
	}
	return ids
}

// Equal reports whether k and o hold the same keys in the same order.
func (k *Keyring) Equal(o *Keyring) bool {
	if k == nil || o == nil {
		return k == o
	}
	if len(k.keys) != len(o.keys) {
		return false
	}
	for i := range k.keys {
		if !hmac.Equal(k.keys[i], o.keys[i]) {
			return false
		}
	}
	return true
}

// appendTag appends to dst the HMAC-SHA256 of msg keyed with the signing key
// (msg may be part of dst).
func (k *Keyring) appendTag(dst, msg []byte) []byte {
	mac := hmac.New(sha256.New, k.keys[0])
	mac.Write(msg)
	return mac.Sum(dst)
}

// verify reports whether tag is the HMAC-SHA256 of b under one of the keys,
// comparing in constant time.
func (k *Keyring) verify(b, tag []byte) bool {
	var sum [sha256.Size]byte
	for _, key := range k.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(b)
		if hmac.Equal(mac.Sum(sum[:0]), tag) {
			return true
		}
	}
	return false
}
