package file

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// A one-shot load (a Cache that keeps nothing) with a disk cache to read
// decodes each document the disk cache holds while it reads the file,
// from a buffer of streamBuffer bytes, instead of holding the whole file
// while every object is decoded. At 10,000 Services the lab's publication
// is 5.4 MB, held beside the disk cache's bytes and the objects where the
// heap of `svcnet get` peaked. A document the disk cache does
// not hold is kept (a copy of its text) for the load's second pass, which
// decodes it as any other (in parallel, prefetch); a document of a kind
// the load skips is noted for the disk cache and dropped. The documents
// are the same as splitDocuments gives for the whole file, in the same
// order, under the same origins.

// A file of streamMin bytes or fewer is read whole, into one buffer that
// every such file of the load reuses, and its documents are kept as a
// streamed file's: the lab keeps one manifest per object, and at 10,000
// Services their bytes (about 4 MB) were held until the load's second
// pass. Reading each through a stream buffer of its own instead made
// every load three times slower.

// streamBuffer is the read buffer of a streamed file.
const (
	streamBuffer = 64 << 10
	streamMin    = 1 << 20
)

// streams reports whether the load reads its files as streams: it keeps
// nothing, and it has a disk cache with documents to decode from.
func (c *Cache) streams() bool {
	return !c.keeps() && c.disk != nil && len(c.disk.have) > 0
}

// stream is read for a one-shot load (streams) of a file of more than
// streamMin bytes: the file at path, open as fd, as fileRead's documents,
// where each document the disk cache answered or the load skips is done
// (r.done[i], its objects in r.ready[i]) and has no text, and each other
// one is a copy of its text. ok is false for a file that is not one
// stream of documents as it reads it (a JSON stream that does not parse,
// a file that starts with more white space than its buffer), which the
// load reads whole instead: that is where its errors are worded.
func (c *Cache) stream(path string, fd int) (r fileRead, ok bool, err error) {
	br := bufio.NewReaderSize(fdReader(fd), streamBuffer)
	isJSON, known, err := startsJSON(br)
	if err != nil || !known {
		return fileRead{}, false, readError(path, err)
	}
	r = fileRead{path: path}
	emit := func(doc []byte) { c.keepDocument(&r, doc) }
	if isJSON {
		ok, err = splitJSONStream(br, emit)
	} else {
		ok, err = true, splitYAMLStream(br, emit)
	}
	if err != nil || !ok {
		return fileRead{}, false, readError(path, err)
	}
	return r, true, nil
}

func readError(path string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: "read", Path: path, Err: err}
}

// keepDocument appends doc, the next document of r, as a one-shot load
// keeps it: done, with no text, when the load skips its kind (noted for
// the disk cache) or the disk cache decodes it (to r.ready); else a copy
// of its text.
func (c *Cache) keepDocument(r *fileRead, doc []byte) {
	origin := docOrigin(r.path, len(r.docs))
	r.origins = append(r.origins, origin)
	var d decoded
	done := c.only.skips(doc)
	if done {
		c.disk.keepSkipped(doc)
	} else if l, ok := c.disk.lookupCached(origin, doc); ok {
		c.disk.record(l)
		d, done = l.d, true
	}
	r.done = append(r.done, done)
	r.ready = append(r.ready, d)
	if done {
		r.docs = append(r.docs, nil)
	} else {
		r.docs = append(r.docs, bytes.Clone(doc))
	}
}

// fdReader reads a file descriptor with the system call, as readInto.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// startsJSON reports whether the stream's first character past white
// space (as bytes.TrimSpace reads it) opens a JSON object or array: the
// test of splitDocuments. known is false when the stream starts with more
// white space than br buffers. It reads nothing from br.
func startsJSON(br *bufio.Reader) (isJSON, known bool, err error) {
	for n := 64; ; n *= 2 {
		b, err := br.Peek(n)
		rest := bytes.TrimLeftFunc(b, unicode.IsSpace)
		// A rune cut at the end of the peek may be a space or not: look
		// further unless the stream ends there.
		if len(rest) > 0 && utf8.FullRune(rest) {
			return rest[0] == '{' || rest[0] == '[', true, nil
		}
		switch {
		case errors.Is(err, io.EOF):
			return len(rest) > 0 && (rest[0] == '{' || rest[0] == '['), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			return false, false, nil
		case err != nil:
			return false, false, err
		}
	}
}

// splitJSONStream gives emit the values of a JSON stream in order, each
// valid only during the call, as splitDocuments gives them; ok is false
// when the stream does not parse.
func splitJSONStream(r io.Reader, emit func(doc []byte)) (ok bool, err error) {
	dec := json.NewDecoder(r)
	var m json.RawMessage
	for {
		err := dec.Decode(&m)
		var syntax *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return true, nil
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return false, nil
		case err != nil:
			return false, err
		}
		emit(m)
	}
}

// splitYAMLStream gives emit the documents of a YAML stream in order (an
// empty one as nil), each valid only during the call, as splitDocuments
// gives them: split at lines that start with "---" followed by nothing,
// spaces or a comment.
func splitYAMLStream(br *bufio.Reader, emit func(doc []byte)) error {
	var doc, long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok && isSeparatorRest(rest) {
			emit(emptyAsNil(doc))
			doc = doc[:0]
		} else {
			doc = append(doc, line...)
		}
		if err != nil { // io.EOF
			emit(emptyAsNil(doc))
			return nil
		}
	}
}
