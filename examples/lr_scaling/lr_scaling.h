#ifndef TAPEGRAD_LR_SCALING_H
#define TAPEGRAD_LR_SCALING_H
/* lr_scaling's runs are train_gpt subprocesses (examples/common/train_run.h). */
#include "examples/common/train_run.h"

#endif
