/* rpn: a reverse Polish notation calculator (the code under test). */
#ifndef RPN_H
#define RPN_H

/* rpn_eval evaluates a space-separated RPN expression of integers and + - * /.
 * It returns 0 and stores the result in *out, or -1 on a malformed expression
 * or a division by zero. */
int rpn_eval(const char *expr, long *out);

#endif
