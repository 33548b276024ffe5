package runtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/runtime/engine"
)

// TestTransferGoesThroughTheTransportOfTheCall checks that an agent's code
// transfers without knowing the transport: Transfer in OnEnter reaches the
// session's engine.Transferer with the target, the timeout and the token asked
// for, or the default timeout; a session whose transport cannot transfer,
// and a context of no session, get ErrTransferUnsupported.
func TestTransferGoesThroughTheTransportOfTheCall(t *testing.T) {
	if err := Transfer(context.Background(), "sip:desk@example.com"); !errors.Is(err, ErrTransferUnsupported) {
		t.Errorf("outside a session: %v; want ErrTransferUnsupported", err)
	}
	for _, tc := range []struct {
		name      string
		transfers bool
		opts      []TransferOption
		want      engine.TransferRequest
		err       error
	}{
		{name: "phone", transfers: true, want: engine.TransferRequest{Target: "sip:desk@example.com", Timeout: DefaultTransferTimeout}},
		{name: "phone with options", transfers: true, opts: []TransferOption{WithTransferTimeout(5 * time.Second), WithHandoffToken("tok")},
			want: engine.TransferRequest{Target: "sip:desk@example.com", Timeout: 5 * time.Second, Token: "tok"}},
		{name: "browser", err: ErrTransferUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []engine.TransferRequest
				result := make(chan error, 1)
				su := setup{agent: func(a *Agent) {
					a.OnEnter = func(ctx context.Context, s *Session) error {
						result <- Transfer(ctx, "sip:desk@example.com", tc.opts...)
						return nil
					}
				}}
				if tc.transfers {
					su.opts = append(su.opts, engine.WithTransferer(func(_ context.Context, r engine.TransferRequest) error {
						got = append(got, r)
						return nil
					}))
				}
				start(t, su)
				err := <-result
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
					t.Fatalf("Transfer: %v; want %v", err, tc.err)
				}
				if tc.transfers && (len(got) != 1 || got[0] != tc.want) {
					t.Errorf("the transport was asked %+v; want %+v", got, tc.want)
				}
			})
		})
	}
}
