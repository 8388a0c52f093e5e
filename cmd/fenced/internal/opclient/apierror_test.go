package opclient

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/stonith"
)

// TestAPIErrorMessages: a refusal says "refused" once, and a 401 says
// whether credentials were missing or refused.
func TestAPIErrorMessages(t *testing.T) {
	const addr = "https://mgmt1:9443"
	conflict := &stonith.APIError{StatusCode: http.StatusConflict, Message: "refused: node worker-1 has an open fence fence-3"}
	assert.Equal(t, "refused: node worker-1 has an open fence fence-3", APIError(addr, true, conflict).Error())
	other := &stonith.APIError{StatusCode: http.StatusConflict, Message: "conflict: fence-3 moved on"}
	assert.Equal(t, "refused: conflict: fence-3 moved on", APIError(addr, true, other).Error())

	unauth := &stonith.APIError{StatusCode: http.StatusUnauthorized, Message: "unauthorized"}
	assert.Contains(t, APIError(addr, false, unauth).Error(), "no credentials given")
	wrong := APIError(addr, true, unauth).Error()
	assert.Contains(t, wrong, "refused the credentials given")
	assert.NotContains(t, wrong, "no credentials")
}
