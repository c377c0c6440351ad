// Only the declaration in include/CFuzzDriver.h is used; SwiftPM wants a source file.
#include "CFuzzDriver.h"
