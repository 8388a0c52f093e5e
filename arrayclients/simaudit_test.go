package arrayclients_test

import ()
