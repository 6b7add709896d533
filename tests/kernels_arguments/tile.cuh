// Included by scheduled.cu from beside it: the harness writes it into the kernel's source.
#pragma once
#define TILE 16
