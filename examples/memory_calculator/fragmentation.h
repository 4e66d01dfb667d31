#ifndef TAPEGRAD_FRAGMENTATION_H
#define TAPEGRAD_FRAGMENTATION_H
/* memory_calculator --fragmentation (fragmentation.c). */
void fragmentation_demo(void);
#endif
