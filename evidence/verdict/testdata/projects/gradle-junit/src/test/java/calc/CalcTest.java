package calc;

import static org.junit.Assert.assertEquals;

import org.junit.Ignore;
import org.junit.Test;

public class CalcTest {
    @Test
    public void adds() {
        assertEquals(5, Calc.add(2, 3));
    }

    @Test(expected = ArithmeticException.class)
    public void dividesByZero() {
        Calc.divide(1, 0);
    }

    @Test
    public void failsOnPurpose() {
        assertEquals("a deliberately wrong expectation", 4, Calc.add(2, 3));
    }

    @Ignore("skipped on purpose")
    @Test
    public void skipped() {
    }
}
