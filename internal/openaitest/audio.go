package openaitest

import "net/http"

type audioState struct{}

func (s *Server) routeAudio(mux *http.ServeMux) {}
