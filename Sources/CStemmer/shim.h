// Snowball's libstemmer (Debian's libstemmer-dev). It ships no pkg-config
// file, so the module map links `stemmer` itself.
#include <libstemmer.h>
