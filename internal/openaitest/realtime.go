package openaitest

import "net/http"

type realtimeState struct{}

func (s *Server) routeRealtime(mux *http.ServeMux) {}
