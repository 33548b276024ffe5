package openaitest

import "net/http"

type chatState struct{}

func (s *Server) routeChat(mux *http.ServeMux) {}
