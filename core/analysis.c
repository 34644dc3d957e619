/*
 * analysis.c - the analysis cache attached to a graph.
 */
#include "analysis.h"

void kiln__analyses_free(kiln_graph *g)
{
    kiln__free(g->analyses);
    g->analyses = NULL;
}
