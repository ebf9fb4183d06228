package quota

// Caller is whom a deduct, check, rollback or read of noted identities is for, and so whose
// idemKeys it uses. Services (Service's own methods, which are As("")) share one namespace of
// idemKeys, as they always have. A shopper's calls (As(subject)) have their own: its idemKeys
// are stored under its subject, so another shopper or a service sending the same idemKey meets
// none of them, and cannot answer, block or roll back the shopper's deducts with it; retries,
// checks and rollbacks behave as ever within it.
type Caller struct {
	s       *Service
	subject string
}

// As returns the calls of subject, a verified end user; "" is a service.
func (s *Service) As(subject string) Caller { return Caller{s: s, subject: subject} }

// scopeMark separates a subject from its idemKey in the stored form. Neither may hold a control
// character (wire.CheckText), so "<subject>\x1f<idemKey>" names one of each, and no client can
// send it as an idemKey of its own.
const scopeMark = "\x1f"

// stored is idemKey as the caller's records, request keys and rolling entries hold it.
func (c Caller) stored(idemKey string) string {
	if c.subject == "" {
		return idemKey
	}
	return c.subject + scopeMark + idemKey
}
