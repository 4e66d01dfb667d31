/* Moved to cli/settings.h; this forwarding header goes once every program includes that. */
#include "cli/settings.h"
