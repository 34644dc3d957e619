/* Placeholder until the CLI lands. */
#include <stdio.h>
int main(void)
{
    fputs("kiln: CLI not built yet\n", stderr);
    return 2;
}
