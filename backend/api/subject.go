package api

import (
	"context"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// The end user a request acts for. The edge verifies an end user's token and forwards its
// subject in X-VG-Subject with its own service key; the backend trusts the header only from a
// key with scope edge (keys.go: from any other key, or with no keys configured, it is a 403, not
// ignored, so that an edge whose key lacks the scope fails loudly instead of running unchecked).
// A trusted subject narrows what the request may touch to the subject's own:
//
//   - reserve: the body's customerId must be the subject;
//   - confirm and release: the order's customer must be (read from its redemption first; an
//     order of no customer yet is answered 404 as the call would, so it cannot be claimed between
//     the check and the call);
//   - quota deduct: every item whose identityType is USER must name the subject as its identity;
//   - quota rollback: every USER identity the idemKey's deducts noted must be the subject. A
//     deduct of the same idemKey running at the same moment may note another after the check:
//     idemKeys are the caller's, one per purchase, so that takes two users sharing one. An
//     idemKey nothing has noted yet is answered as a rollback of nothing, without the
//     rolled-back mark: the mark would refuse every later deduct of that idemKey, whoever's,
//     so a subject writing it could bar another user's purchase by guessing its idemKey. The
//     mark's guarantee (a rollback sent before a timed-out deduct lands wins) stays with
//     service callers; a shopper whose deduct lands after their rollback rolls back again;
//   - quota usage: an identityType of USER must ask for the subject's identity.
//
// Without a subject (a service calling for any customer) nothing here applies. A mismatch is a
// 403 FORBIDDEN, counted as subject_mismatch.

// SubjectHeader carries the end user's subject from a key with scope edge.
const SubjectHeader = "X-VG-Subject"

// SubjectIdentityType is the quota identity type a subject is: identities of this type must be
// the subject.
const SubjectIdentityType = "USER"

// notTheSubject answers 403 for a request that acts for someone other than its subject.
func (s *Server) notTheSubject(ctx *fasthttp.RequestCtx, what string) {
	s.refuse(ctx, refusedSubject, fasthttp.StatusForbidden, wire.CodeForbidden, what+" is not the end user named by "+SubjectHeader)
}

// subjectMayReserve reports whether a reservation for customer may go on; it answers the 403
// when not.
func (s *Server) subjectMayReserve(ctx *fasthttp.RequestCtx, subject, customer string) bool {
	if subject == "" || subject == customer {
		return true
	}
	s.notTheSubject(ctx, "customerId")
	return false
}

// subjectOwnsOrder reports whether the order's reservation is the subject's; it answers the 403
// (or the outcome of reading the order) when not.
func (s *Server) subjectOwnsOrder(c context.Context, ctx *fasthttp.RequestCtx, subject, code, orderID string) bool {
	if subject == "" {
		return true
	}
	r, err := s.vouchers.Redemption(c, code, orderID)
	if err != nil {
		s.respondOutcome(ctx, err)
		return false
	}
	if r.CustomerID != subject {
		s.notTheSubject(ctx, "the order's customer")
		return false
	}
	return true
}

// subjectMayDeduct reports whether every USER identity of items is the subject; it answers the
// 403 when not.
func (s *Server) subjectMayDeduct(ctx *fasthttp.RequestCtx, subject string, items []quota.Item) bool {
	if subject == "" {
		return true
	}
	for i := range items {
		if items[i].IdentityType == SubjectIdentityType && items[i].Identity != subject {
			s.notTheSubject(ctx, "an item's USER identity")
			return false
		}
	}
	return true
}

// subjectMayRollback reports whether the rollback may go on: with no subject, always; with
// one, when every USER identity the idemKey's deducts noted is the subject and at least one
// identity is noted. Otherwise it answers: 403 for another's identity, or 200 with nothing
// given back, writing nothing, for an idemKey nothing has noted (see the top of this file).
func (s *Server) subjectMayRollback(ctx *fasthttp.RequestCtx, subject string, bizID int64, idemKey string) bool {
	if subject == "" {
		return true
	}
	noted, err := s.quotas.Noted(context.Background(), bizID, idemKey)
	if err != nil {
		s.respondOutcome(ctx, err)
		return false
	}
	for _, n := range noted {
		if n.IdentityType == SubjectIdentityType && n.Identity != subject {
			s.notTheSubject(ctx, "a USER identity of this idemKey")
			return false
		}
	}
	if len(noted) == 0 {
		respondJSON(ctx, fasthttp.StatusOK, &wire.QuotaRollbackResponse{IdemKey: idemKey, Returned: []wire.QuotaReturned{}})
		return false
	}
	return true
}

// subjectMayRead reports whether usage of the identity may be read; it answers the 403 when not.
func (s *Server) subjectMayRead(ctx *fasthttp.RequestCtx, subject, identityType, identity string) bool {
	if subject == "" || identityType != SubjectIdentityType || identity == subject {
		return true
	}
	s.notTheSubject(ctx, "identity")
	return false
}
