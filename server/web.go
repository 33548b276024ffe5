package server

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The web client's files, its modules under web/client among them.
//
//go:embed web
var webFiles embed.FS

// webCSP keeps the web client's pages to their own files: no inline
// script or style, nothing from elsewhere.
const webCSP = "default-src 'self'; media-src 'self' blob: mediastream:; connect-src 'self'; img-src 'self' data:; style-src 'self'"

// webClient serves the reference web client.
func webClient() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webHeaders(w)
		// Browsers run a module script only when it is served as
		// JavaScript (nosniff holds them to it), and the file server's type
		// for .js comes from the system's MIME tables, which may say
		// otherwise: say it here.
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		files.ServeHTTP(w, r)
	})
}

// sessionView serves the live timeline page for any session id: the page
// itself holds nothing of the session, whose events it reads from the
// stream with the caller's token, so it is served without one.
func sessionView() http.Handler {
	page, err := webFiles.ReadFile("web/session.html")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
}

func webHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", webCSP)
}

// timelineScripts are the call timeline's scripts, in the order a page
// loads them: the layout, then the view that draws it.
var timelineScripts = []string{"web/timeline-layout.js", "web/timeline.js"}

// TimelineAssets returns the call timeline's script (its files joined in
// load order) and stylesheet, the ones the live session view loads, for
// pages that inline them (holdline inspect writes one self-contained file).
func TimelineAssets() (script, style []byte) {
	for _, name := range timelineScripts {
		b, err := webFiles.ReadFile(name)
		if err != nil {
			panic(err) // the embedded tree is fixed at build time
		}
		script = append(append(script, b...), '\n')
	}
	style, err := webFiles.ReadFile("web/timeline.css")
	if err != nil {
		panic(err)
	}
	return script, style
}
